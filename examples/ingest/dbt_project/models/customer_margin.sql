-- Fails at run time: customer_revenue has no cost column (DuckDB's binder error names it).
select customer_id, revenue / cost as margin
from {{ ref('customer_revenue') }}
