"""The check-build figure: `dsymfind check-build` of an .xcarchive with 50 frameworks
against an S3 store (SeaweedFS on loopback), beside the same HEADs made by a bare boto3.

The archive is built by clang, ld64.lld and dsymutil (tests/support/products.py): an app
whose executable is an Xcode 16 debug-dylib stub (it needs no dSYM, so no request), its
App.debug.dylib and 50 frameworks, each its own code and UUID, without dSYMs/: their dSYMs
are in the store already, as a CI that published them earlier leaves them. bench.py runs
it after its own figures, or alone with `--only check-build`.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_core import CLI, FULL, PYTHON, RUN_TIMEOUT, BenchError, Figure, Pair
from support import products

from dsymfind.stores import layouts

if TYPE_CHECKING:
    from collections.abc import Callable

    from bench_core import SuiteWithS3 as Suite

FRAMEWORKS = 50
PREFIX = "bench-check-build"
GOAL = 1.5

# check-build in this process, its client's requests counted: argv is the endpoint, the
# region, the s3:// location and the archive; one JSON line comes out.
_COUNTED = """\
import contextlib, io, json, sys
from collections import Counter
from dsymfind.commands import check_build
from dsymfind.stores.s3 import upload as s3_target

operations = Counter()
made = s3_target.make_client

def make_client(options):
    client = made(options)
    client.meta.events.register(
        "before-call.s3", lambda model, **_: operations.update([model.name])
    )
    return client

s3_target.make_client = make_client
endpoint, region, store, archive = sys.argv[1:5]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = check_build.check_build(
        [archive], store=store, given={"endpoint_url": endpoint, "region": region}, as_json=True
    )
images = json.loads(out.getvalue())["images"]
print(json.dumps({"status": status, "images": len(images), "operations": operations,
                  "statuses": Counter(image["status"] for image in images)}))
"""


class CheckBuildFigure:
    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self.archive = Path()
        self.uuids: dict[str, str] = {}

    def steps(self) -> list[Callable[[], None]]:
        return [self.check_build_figure]

    def check_build_figure(self) -> None:
        figure = Figure(
            f"`dsymfind check-build` of an archive with {FRAMEWORKS} frameworks against an "
            "S3 store (SeaweedFS on loopback)",
            "a bare boto3 `head_object` of each of the same keys",
            f"≤ 1 request per UUID, ≤ {GOAL}x wall",
        )
        self.suite.on_seaweed([figure], lambda: self._measure(figure))

    def _counted(self, endpoint: str, region: str, store: str, env: dict[str, str]) -> Any:
        """check-build's own run, in process, its requests counted (its JSON line)."""
        argv = [PYTHON, "-c", _COUNTED, endpoint, region, store, str(self.archive)]
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, check=False, timeout=RUN_TIMEOUT
        )
        if done.returncode != 0:
            raise BenchError(f"counted check-build failed: {done.stderr[-300:]}")
        return json.loads(done.stdout.splitlines()[-1])

    def _measure(self, figure: Figure) -> None:
        suite = self.suite
        work = Path(tempfile.mkdtemp(prefix="check-build.", dir=suite.work))
        self.archive, self.uuids = products.many_frameworks(work, FRAMEWORKS)
        admin = suite.seaweed.client("admin")
        keys = [layouts.debug_file_key(layouts.DEFAULT, u) for u in self.uuids.values()]
        for key in keys:
            admin.put_object(Bucket="symbols", Key=f"{PREFIX}/{key}", Body=b"dwarf")
        env = suite.s3_env("ci")
        store = f"s3://symbols/{PREFIX}"
        endpoint = suite.seaweed.endpoint_url
        region = "us-east-1"
        counted = self._counted(endpoint, region, store, env)
        requests = sum(counted["operations"].values())
        shipped = counted["images"]
        if counted["status"] != 0 or counted["statuses"].get("store") != len(keys):
            raise BenchError(f"check-build did not find every dSYM in the store: {counted}")
        check = [
            CLI,
            "check-build",
            str(self.archive),
            "--store",
            store,
            "--endpoint-url",
            endpoint,
            "--region",
            region,
        ]
        heads = suite.boto3_command(
            "for key in sys.argv[3:]:\n    s3.head_object(Bucket=sys.argv[2], Key=key)\n",
            "symbols",
            *(f"{PREFIX}/{key}" for key in keys),
        )
        checked, headed, ratios = [], [], []
        for counted_round in [False] + [True] * suite.scale.fetch_rounds:
            checking = suite.timed_run(check, env, expect=b"complete: ")[0]
            heading = suite.timed_run(heads, env)[0]
            if counted_round:
                checked.append(checking)
                headed.append(heading)
                ratios.append(checking / heading)
        per_uuid = requests / shipped
        figure.notes.append(
            f"{shipped} images ({len(keys)} needing a dSYM, and the app's debug-dylib stub, "
            f"which needs none): {requests} requests "
            f"({', '.join(f'{n} {op}' for op, n in sorted(counted['operations'].items()))}), "
            f"{per_uuid:.2f} per UUID: one HEAD per UUID needing a dSYM, and the one listing "
            "that opening an S3 store makes (it tells a refused key from an absent object). "
            "Both sides in a fresh interpreter with the ci identity's keys, path-style to "
            "the endpoint; check-build also reads the archive's 52 Mach-O headers and imports "
            "its own modules; a first round is not counted."
        )
        pair = Pair.of_rounds(checked, headed, ratios)
        suite.judge(figure, pair, GOAL)
        ops = ", ".join(f"{op} {n}" for op, n in sorted(counted["operations"].items()))
        figure.measured = f"{requests} requests for {shipped} UUIDs ({ops}); {figure.measured}"
        figure.reference_measured = f"{len(keys)} HEADs; {figure.reference_measured}"
        if per_uuid > 1 and suite.scale is FULL:
            figure.met = False
