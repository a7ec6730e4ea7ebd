AUDIT (
  name assert_positive_amount,
  blocking true
);

SELECT *
FROM @this_model
WHERE amount <= 0
