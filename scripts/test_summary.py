"""Reads meson testlog.json files and prints 'N passed, N failed, N skipped'.

Exit status 1 when any test failed or none ran, so scripts and CI can rely on it.
"""
import json
import sys


def main(paths: list[str]) -> int:
    passed = failed = skipped = 0
    notes = []
    for path in paths:
        build = path.split("/")[0]
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line)
                res = r.get("result")
                name = f"{build}: {r.get('name', '?')}"
                if res in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif res == "SKIP":
                    skipped += 1
                    notes.append(f"skipped: {name}")
                else:
                    failed += 1
                    notes.append(f"FAILED: {name} ({res})")
    for note in notes:
        print(note)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
