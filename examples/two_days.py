"""Two days of the example jobs in one Python process, so the JVM starts once.

`python examples/two_days.py OUT_DIR` runs, each unchanged:

1. day one: examples/daily_orders.py;
2. then it waits for a line on stdin (EOF goes on at once), so that whoever drives it
   can look at day one's results first;
3. day two: examples/orders_report.py, which reads the `orders` column of daily_orders'
   output, then examples/daily_orders.py with `v2`, the job's next version, which no
   longer writes that column.

Each script builds and stops its own SparkSession, so each is an application, and a run,
of its own; the second and third reuse the running JVM instead of starting one, which
costs more than their Spark jobs do. None of them has lineagewire code in it.
"""

import pathlib
import runpy
import sys

here = pathlib.Path(__file__).resolve().parent
out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/lineagewire-demo"


def run(script: str, *args: str) -> None:
    sys.argv = [str(here / script), out, *args]
    runpy.run_path(sys.argv[0], run_name="__main__")


run("daily_orders.py")
print("two_days: day one done; a line on stdin starts day two", flush=True)
sys.stdin.readline()
run("orders_report.py")
run("daily_orders.py", "v2")
