"""Runs PyTorch's own test/test_sparse.py twice, with torch alone and with torch_ragged.sparse.accelerate() on,
and lists every test whose outcome differs.

    python scripts/peer_test_sparse.py PATH/TO/test_sparse.py [-k EXPR] [--out DIR]

Every test that passes with torch alone must pass with the acceleration on; the script exits 1 when one does not
(and prints them), 0 otherwise. Tests that fail with torch alone (the file is older or newer than the installed
torch) are counted, not judged.
"""

import argparse
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_DIR = os.path.join(os.path.dirname(HERE), "tests", "peers")


def outcomes(junit_path):
    result = {}
    for case in ElementTree.parse(junit_path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            result[name] = "failed"
        elif "skipped" in kinds:
            result[name] = "skipped"
        else:
            result[name] = "passed"
    return result


def run(test_file, select, out_dir, accelerated):
    junit = os.path.join(out_dir, f"junit_{'accelerated' if accelerated else 'torch'}.xml")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file, f"--junitxml={junit}"]
    if select:
        command += ["-k", select]
    env = dict(os.environ, PYTORCH_PRINT_REPRO_ON_FAILURE="0")
    if accelerated:
        command += ["-p", "accelerate_plugin"]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [PLUGIN_DIR, env.get("PYTHONPATH")]))
    log = os.path.join(out_dir, f"log_{'accelerated' if accelerated else 'torch'}.txt")
    with open(log, "w") as sink:
        subprocess.run(command, cwd=os.path.dirname(os.path.abspath(test_file)), env=env, stdout=sink,
                       stderr=subprocess.STDOUT, check=False)
    return outcomes(junit)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("test_file")
    parser.add_argument("-k", dest="select", default="CPU or cpu or Legacy or OneOff",
                        help="pytest -k expression (default: the CPU tests)")
    parser.add_argument("--out", default="build/peer_test_sparse")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    alone = run(args.test_file, args.select, args.out, accelerated=False)
    accelerated = run(args.test_file, args.select, args.out, accelerated=True)
    counts = {kind: sum(v == kind for v in alone.values()) for kind in ("passed", "failed", "skipped")}
    regressions = sorted(name for name, outcome in alone.items()
                         if outcome == "passed" and accelerated.get(name) != "passed")
    fixed = sorted(name for name, outcome in alone.items()
                   if outcome == "failed" and accelerated.get(name) == "passed")
    print(f"torch alone: {len(alone)} tests, {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped")
    accelerated_passed = sum(v == "passed" for v in accelerated.values())
    print(f"accelerated: {accelerated_passed} passed; passing with torch alone but not accelerated: "
          f"{len(regressions)}; failing alone but passing accelerated: {len(fixed)}")
    for name in regressions:
        print(f"  REGRESSION {name} ({accelerated.get(name, 'missing')})")
    for name in fixed:
        print(f"  now passes {name}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
