MODEL (
  name shop.raw_customers,
  kind SEED (
    path '../seeds/raw_customers.csv'
  ),
  columns (
    customer_id INT,
    name STRING,
    country STRING
  ),
  grain customer_id,
  start '2024-01-01',
  end '2024-01-07'
);
