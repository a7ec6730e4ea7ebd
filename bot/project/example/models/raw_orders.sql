MODEL (
  name shop.raw_orders,
  kind SEED (
    path '../seeds/raw_orders.csv'
  ),
  columns (
    order_id INT,
    customer_id INT,
    item_id INT,
    amount DOUBLE,
    ds STRING
  ),
  grain order_id,
  start '2024-01-01',
  end '2024-01-07',
  description 'Orders as exported by the shop system'
);
