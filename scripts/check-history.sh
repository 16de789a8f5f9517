#!/usr/bin/env bash
# Fails when a tracked file, or a tracked file's name, refers to the process that produced the
# repository instead of to what the repository is: a numbered work session (the word "session"
# followed by its number) or this project's own tracker ("issue", "issues", a number after it).
# Readers of the repository have neither. Another project's issue ("web-llm#753") is a fact a
# reader can follow and is not matched.
#
#   scripts/check-history.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Case-insensitive, whole words, a number after them, with or without '#'.
pattern='\b(sessions?|issues?) #?[0-9]+\b'

found=0
# -I skips binary files (images); lock files hold no prose.
if git grep -nIiE "$pattern" -- . ':!*.lock' ':!**/package-lock.json'; then
  found=1
fi
if git ls-files | grep -iE '(session|issue)[-_ ]?[0-9]+'; then
  found=1
fi
if [ "$found" = 1 ]; then
  echo "check-history: the lines above name a work session or a tracker issue of this project;" >&2
  echo "check-history: say what the code or number is and why, in the present tense." >&2
  exit 1
fi
echo "check-history: no session or issue references in $(git ls-files | wc -l) tracked files"
