#!/usr/bin/env bash
# The whole meshbot story on the bundled example, on local Spark with SQLite state and GitHub output
# written to a folder: install, apply prod, then play a pull request the way the GitHub Action does
# (opened → comment → approval → merge deploy → close) with real webhook payloads, in local mode.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
demo="${1:-$here/out/demo}"
python="${PYTHON:-python3}"

if [ ! -x "$here/.venv/bin/meshbot" ]; then
  echo "==> Installing meshbot into $here/.venv"
  "$python" -m venv "$here/.venv"
  "$here/.venv/bin/python" -m pip install --quiet --upgrade pip
  # pinned as the README installs it: the lock of the `spark` extra (the full PySpark, local Spark), each
  # package checked against its hash, then meshbot itself without resolving anything again
  "$here/.venv/bin/python" -m pip install --quiet --require-hashes -r "$here/requirements/spark.txt"
  "$here/.venv/bin/python" -m pip install --quiet --no-deps -e "$here"
fi
meshbot="$here/.venv/bin/meshbot"
py="$here/.venv/bin/python"
payloads="$here/tests/fixtures/github/webhooks"      # real payloads (tests/fixtures/github/SOURCE.md)
github="$demo/.meshbot/github"                         # what GitHub would keep: the comment, check runs
events="$demo/.meshbot/events"

echo "==> Writing the example project to $demo"
# a previous demo's warm local Spark engine serves the folder about to be removed: stop it first
if [ -d "$demo/.meshbot/engine" ]; then "$meshbot" -p "$demo" engine stop >/dev/null 2>&1 || true; fi
rm -rf "$demo"
"$meshbot" init "$demo"
cat >> "$demo/config.yaml" <<'YAML'
cicd_bot:
  deploy_on: merge
users:
  - username: ann
    github_username: ann-gh
    roles: [required_approver]
YAML
mkdir -p "$events"

# The default branch (`master` in the payloads): the bot reads its gate settings (cicd_bot, users) from
# config.yaml there, as data, never from the files a pull request checks out.
echo "==> Committing the project as the default branch"
[ -f "$demo/.gitignore" ] || printf '.meshbot/\n' > "$demo/.gitignore"
git -C "$demo" init -q -b master
git -C "$demo" add -A
git -C "$demo" -c user.name=demo -c user.email=demo@example.com -c commit.gpgsign=false commit -q -m "the shop project"
git -C "$demo" update-ref refs/remotes/origin/master HEAD

echo "==> Unit tests"
"$meshbot" -p "$demo" test

echo "==> Plan and apply prod"
"$meshbot" -p "$demo" plan prod --auto-apply --no-prompts
"$meshbot" -p "$demo" fetchdf "SELECT * FROM shop.customer_revenue ORDER BY revenue DESC" --limit 5

echo "==> A pull request: orders gets a new column"
sed -i.bak 's/^  ds$/  ds,\n  amount * 100 AS amount_cents/' "$demo/models/orders.sql" && rm "$demo/models/orders.sql.bak"
# The job that deploys the merge checks out the merge commit: meshbot deploys exactly the pushed commit.
git -C "$demo" -c user.name=demo -c user.email=demo@example.com -c commit.gpgsign=false commit -qam "Merge pull request #2"
merge_sha="$(git -C "$demo" rev-parse HEAD)"

# The events GitHub would send, and what it would answer, from the real payloads.
"$py" - "$payloads" "$events" "$merge_sha" <<'PY'
import copy, json, sys
from pathlib import Path
payloads, events = Path(sys.argv[1]), Path(sys.argv[2])
load = lambda name: json.loads((payloads / name).read_text())
opened = load("pull_request/opened.payload.json")
head, merge = opened["pull_request"]["head"]["sha"], sys.argv[3]
review = load("pull_request_review/submitted.payload.json")
review["review"].update(state="approved", commit_id=head)
review["review"]["user"]["login"] = "ann-gh"
push = load("push/payload.json")
push.update(ref="refs/heads/master", after=merge, deleted=False, created=False)
closed = load("pull_request/closed.payload.json")
merged = dict(copy.deepcopy(opened["pull_request"]), state="closed", merged=True, merge_commit_sha=merge)
closed["pull_request"] = merged
for name, raw in {"opened": opened, "review": review, "push": push, "closed": closed}.items():
    (events / f"{name}.json").write_text(json.dumps(raw))
approval = dict(review["review"], state="APPROVED")
(events / "answers-open.json").write_text(json.dumps({"pulls": [opened["pull_request"]]}))
(events / "answers-approved.json").write_text(json.dumps({"pulls": [merged], "reviews": {"2": [approval]}}))
PY

bot() {   # bot EVENT_NAME EVENT_FILE ANSWERS_FILE: one GitHub Actions job, in local mode (no network)
  "$meshbot" github --event-name "$1" --event-path "$events/$2.json" --answers "$events/$3.json" \
    --output-dir "$github" -p "$demo" run-all
}

echo "==> PR opened: environment, tests, prod preview, data diff, one comment (approval pending)"
bot pull_request opened answers-open
echo "==> The PR comment after the first push ($github/comment.md):"
cat "$github/comment.md"
echo "==> Approved by @ann-gh, a required approver"
bot pull_request_review review answers-approved
echo "==> Merged: the push to the default branch deploys to prod"
bot push push answers-approved
"$meshbot" -p "$demo" fetchdf "SELECT order_id, amount, amount_cents FROM shop.orders ORDER BY order_id" --limit 3
echo "==> Closed: the PR environment is removed"
bot pull_request closed answers-approved
"$meshbot" -p "$demo" environments

echo "==> The same comment after the merge and close:"
cat "$github/comment.md"
echo "==> Check runs: $github/check_runs.json"
echo "==> Stopping the demo's local Spark engine (on your own project it stays up for the next command)"
"$meshbot" -p "$demo" engine stop
