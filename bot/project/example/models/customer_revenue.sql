MODEL (
  name shop.customer_revenue,
  kind FULL,
  start '2024-01-01',
  end '2024-01-07',
  grain customer_id,
  tags [finance],
  description 'Revenue and order count per customer'
);

SELECT
  c.customer_id,
  c.name,
  COUNT(o.order_id) AS order_count,
  SUM(o.amount) AS revenue
FROM shop.customers AS c
JOIN shop.orders AS o
  ON c.customer_id = o.customer_id
GROUP BY
  c.customer_id,
  c.name
