MODEL (
  name shop.orders,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column (ds, '%Y-%m-%d')
  ),
  start '2024-01-01',
  end '2024-01-07',
  cron '@daily',
  grain order_id,
  audits (
    not_null(columns := (order_id, customer_id, ds)),
    assert_positive_amount
  ),
  description 'One row per order, loaded day by day'
);

SELECT
  order_id,
  customer_id,
  item_id,
  amount,
  ds
FROM shop.raw_orders
WHERE ds BETWEEN @start_ds AND @end_ds
