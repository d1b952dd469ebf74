#!/usr/bin/env bash
# Rewrites docs/cli.md from the vit program's help (every subcommand's --help): run it after
# changing a flag. The page's format lives in tests/apps/test_cli_doc.cpp, which also fails
# while the page is behind the program.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build -j"$(nproc)" --target vit test_cli >/dev/null
VIT_WRITE_CLI_DOC=1 build/tests/test_cli --gtest_filter='CliDoc.*' --gtest_brief=1 >/dev/null
echo "cli_doc: wrote docs/cli.md"
