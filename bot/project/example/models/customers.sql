MODEL (
  name shop.customers,
  kind INCREMENTAL_BY_UNIQUE_KEY (
    unique_key customer_id
  ),
  start '2024-01-01',
  end '2024-01-07',
  grain customer_id,
  audits (
    unique_values(columns := (customer_id))
  )
);

SELECT
  customer_id,
  name,
  country
FROM shop.raw_customers
