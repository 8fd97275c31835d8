"""Codec speed: our encode/decode next to raw fastavro schemaless on the same records, same run.

    .venv/bin/python -m bench.codec [--n 20000] [--rounds 7]

Target: our codec at least 0.8 of raw fastavro, for every event kind, both ways.
Rounds alternate ours and raw; the figure is the median of the per-round ratios.
``decode`` is the Codec as it runs: the compiled reader where it is built (``reader`` in the output says
``native``), else fastavro (``fastavro``), whose raw figure is beside it.
"""

from __future__ import annotations

import argparse
import io
import os
import time

from fastavro import schemaless_reader, schemaless_writer

from bench._common import median, save
from bench.samples import samples
from lineagewire.schemas import Codec, _native, _repository, full_name


def _rate(fn, n: int) -> float:  # noqa: ANN001
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    codec = Codec()
    results = {}
    for kind, event in samples().items():
        parsed = _repository.current()[full_name(kind)].parsed
        data = codec.encode(event)
        body = data[10:]

        def raw_encode(event=event, parsed=parsed) -> bytes:  # noqa: ANN001
            buf = io.BytesIO()
            schemaless_writer(buf, parsed, event)
            return buf.getvalue()

        def raw_decode(body=body, parsed=parsed) -> dict:  # noqa: ANN001
            return schemaless_reader(io.BytesIO(body), parsed)

        def our_encode(event=event) -> bytes:  # noqa: ANN001
            return codec.encode(event)

        def our_decode(data=data) -> dict:  # noqa: ANN001
            return codec.decode(data)

        rows: dict[str, list[float]] = {k: [] for k in ("raw_encode", "our_encode", "raw_decode", "our_decode")}
        for _ in range(args.rounds):
            rows["raw_encode"].append(_rate(raw_encode, args.n))
            rows["our_encode"].append(_rate(our_encode, args.n))
            rows["raw_decode"].append(_rate(raw_decode, args.n))
            rows["our_decode"].append(_rate(our_decode, args.n))
        enc_ratio = median([o / r for o, r in zip(rows["our_encode"], rows["raw_encode"], strict=True)])
        dec_ratio = median([o / r for o, r in zip(rows["our_decode"], rows["raw_decode"], strict=True)])
        results[kind] = {
            "bytes": len(data),
            "encode_per_s": round(median(rows["our_encode"])),
            "raw_encode_per_s": round(median(rows["raw_encode"])),
            "encode_ratio": round(enc_ratio, 3),
            "decode_per_s": round(median(rows["our_decode"])),
            "raw_decode_per_s": round(median(rows["raw_decode"])),
            "decode_ratio": round(dec_ratio, 3),
            "decode_us": round(1e6 / median(rows["our_decode"]), 2),
            "raw_decode_us": round(1e6 / median(rows["raw_decode"]), 2),
        }
    worst = min(min(r["encode_ratio"], r["decode_ratio"]) for r in results.values())
    save("codec", {"n": args.n, "rounds": args.rounds, "reader": "native" if _native.AVAILABLE else "fastavro",
                   "load_average": [round(x, 2) for x in os.getloadavg()],
                   "target_ratio": 0.8, "worst_ratio": worst,
                   "meets_target": worst >= 0.8, "kinds": results})


if __name__ == "__main__":
    main()
