select customer_id, sum(amount) as revenue
from {{ source('lake', 'orders') }}
group by customer_id
