select customer_id, revenue
from {{ ref('customer_revenue') }}
where revenue > 30
