#!/usr/bin/env bash
# What made the last ctest run in BUILD_DIR fail, short: for each failed test its name and the
# lines of its output that say why (gtest's "Failure" blocks, pytest's "E " and "FAILED"
# lines, sanitizer and error lines; each once), 30 at most per test. Appended to
# build/ctest-failures.log, which scripts/test.sh prints last, before its stage times: a CI
# log that keeps only its tail then still shows which test failed and why.
#   scripts/ctest_digest.sh BUILD_DIR TITLE      e.g. scripts/ctest_digest.sh build "VIT_ISA=generic"
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
dir=$1 title=$2
log=$dir/Testing/Temporary/LastTest.log
out=build/ctest-failures.log
mkdir -p build
{
  echo "== $title ($dir)"
  if [[ ! -f $log ]]; then
    echo "   (no $log: ctest did not run)"
    exit 0
  fi
  awk '
    /^[0-9]+\/[0-9]+ Test: / { name = $3; n = 0; inside = 0; next }
    /^Output:$/ { inside = 1; getline; next }               # the dashes after it
    /^<end of output>$/ { inside = 0; next }
    inside { out[++n] = $0; next }
    /^Test Failed\.$|^Test Failed|^Test Timeout|^Test Exception|^\*\*\*/ && name != "" {
      print "-- " name ": " $0
      shown = 0; after = 0; delete seen
      for (i = 1; i <= n && shown < 30; i++) {
        line = out[i]
        # gtest: "file:line: Failure" and the lines after it; pytest: "E   ..." and its summary
        if (line ~ /: Failure$|^\[  FAILED  \]|Sanitizer|runtime error/) after = 6
        else if (line ~ /^E  |^(FAILED|ERROR) |^vit: error|^terminate called/) after = 1
        if (after > 0 && !(line in seen)) { seen[line] = 1; print "   " substr(line, 1, 300); shown++ }
        if (after > 0) after--
      }
      if (shown == 0) for (i = (n > 15 ? n - 14 : 1); i <= n; i++) print "   " substr(out[i], 1, 300)
      name = ""
    }
  ' "$log"
} >>"$out"
