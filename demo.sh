#!/usr/bin/env bash
# The whole meshbot story on the bundled example, on local Spark with SQLite state and GitHub output
# written to a folder: install, apply prod, change a model, plan a dev environment, run the PR bot.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
demo="${1:-$here/out/demo}"
python="${PYTHON:-python3}"

if [ ! -x "$here/.venv/bin/meshbot" ]; then
  echo "==> Installing meshbot into $here/.venv"
  "$python" -m venv "$here/.venv"
  "$here/.venv/bin/python" -m pip install --quiet --upgrade pip
  "$here/.venv/bin/python" -m pip install --quiet -e "$here"
fi
meshbot="$here/.venv/bin/meshbot"

echo "==> Writing the example project to $demo"
rm -rf "$demo"
"$meshbot" init "$demo"

echo "==> Unit tests"
"$meshbot" -p "$demo" test

echo "==> Plan and apply prod"
"$meshbot" -p "$demo" plan prod --auto-apply --execution-time 2024-01-08
"$meshbot" -p "$demo" fetchdf "SELECT * FROM shop.customer_revenue ORDER BY revenue DESC" --limit 5

echo "==> A non-breaking change: orders gets a new column"
sed -i.bak 's/^  ds$/  ds,\n  amount * 100 AS amount_cents/' "$demo/models/orders.sql" && rm "$demo/models/orders.sql.bak"
"$meshbot" -p "$demo" plan dev --auto-apply --execution-time 2024-01-08
"$meshbot" -p "$demo" table_diff prod:dev shop.orders

echo "==> The PR bot on a pull_request event, in local mode (no network)"
event="$here/tests/fixtures/github/webhooks/pull_request/opened.payload.json"   # a real payload (SOURCE.md)
"$meshbot" github --event-name pull_request --event-path "$event" --output-dir "$demo/.meshbot/github" \
  -p "$demo" run-all
echo "==> The PR comment meshbot would post ($demo/.meshbot/github/comment.md):"
cat "$demo/.meshbot/github/comment.md"
