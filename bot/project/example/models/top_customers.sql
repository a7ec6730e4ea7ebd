MODEL (
  name shop.top_customers,
  kind VIEW,
  start '2024-01-01',
  end '2024-01-07',
  tags [finance]
);

SELECT
  customer_id,
  name,
  revenue
FROM shop.customer_revenue
WHERE revenue >= 100
