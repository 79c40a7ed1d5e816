import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import { bundledLibsPath, launcherPath, libsArgs, parseProbe, probeGradguard, processEnv, runProcess, safeCwd } from "../src/environment";

// client/out/tsc/test -> the repository root, where client/launcher/launch.py is (as in the installed extension).
const ROOT = path.resolve(__dirname, "../../../..");
const LAUNCHER = launcherPath(ROOT);

function realPython(): string {
  for (const python of ["python3", "python"]) {
    try {
      execFileSync(python, ["--version"]);
      return python;
    } catch {
      /* next */
    }
  }
  throw new Error("no python on PATH");
}

test("the launcher ships at client/launcher/launch.py and everything runs in its directory", () => {
  assert.ok(fs.existsSync(LAUNCHER), LAUNCHER);
  assert.equal(safeCwd(LAUNCHER), path.join(ROOT, "client", "launcher"));
});

test("the launcher's probe reports the interpreter, its flags and gradguard (real python)", async () => {
  const p = await probeGradguard(realPython(), LAUNCHER);
  assert.match(p.python ?? "", /^3\.\d+\.\d+$/);
  assert.ok(p.flags.every((f) => f === "-I" || f === "-P"), JSON.stringify(p.flags));
  assert.ok(p.installed ? /^gradguard:/.test(p.detail) : /ModuleNotFoundError|too old/.test(p.detail), p.detail);
});

test("the launcher never imports gradguard from the working directory or an --exclude folder (real python)", () => {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), "gg-probe-ws-"));
  const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), "gg-probe-cwd-"));
  const probe = (args: string[], cwd: string, pythonpath: string) =>
    spawnSync(realPython(), [LAUNCHER, ...args, "--probe"], { cwd, env: { ...process.env, PYTHONPATH: pythonpath }, encoding: "utf8" }).stdout;
  try {
    fs.mkdirSync(path.join(ws, "gradguard"));
    fs.writeFileSync(path.join(ws, "gradguard", "__init__.py"), "__version__ = 'from-the-workspace'\n");
    // An empty PYTHONPATH component is the working directory.
    assert.doesNotMatch(probe([], ws, ":"), /from-the-workspace/);
    // PYTHONPATH naming a workspace folder: --exclude drops it (and without it, it would be imported).
    assert.doesNotMatch(probe(["--exclude", ws], elsewhere, ws), /from-the-workspace/);
    assert.match(probe([], elsewhere, ws), /gradguard:from-the-workspace/);
  } finally {
    fs.rmSync(ws, { recursive: true, force: true });
    fs.rmSync(elsewhere, { recursive: true, force: true });
  }
});

test("probe output: installed, missing, too old; unknown flags are dropped", () => {
  assert.deepEqual(parseProbe({ code: 0, stdout: "python:3.12.1\nflags:-I\nsource:bundled\ngradguard:9.9\nlocation:/ext/bundled/libs/gradguard\n", stderr: "" }), {
    installed: true,
    version: "9.9",
    flags: ["-I"],
    python: "3.12.1",
    source: "bundled",
    location: "/ext/bundled/libs/gradguard",
    detail: "gradguard:9.9",
  });
  assert.deepEqual(parseProbe({ code: 3, stdout: "python:3.10.2\nflags:\nsource:environment\nmissing:ModuleNotFoundError: No module named 'gradguard'\n", stderr: "" }), {
    installed: false,
    flags: [],
    python: "3.10.2",
    source: "environment",
    tooOld: false,
    detail: "ModuleNotFoundError: No module named 'gradguard'",
  });
  assert.equal(parseProbe({ code: 3, stdout: "python:3.9.1\nflags:-I\nsource:bundled\nmissing:Python 3.9 is too old: gradguard needs 3.10 or later\n", stderr: "" }).tooOld, true);
  assert.deepEqual(parseProbe({ code: 0, stdout: "flags:-P -X evil\ngradguard:1\n", stderr: "" }).flags, ["-P"]);
});

test("the bundled server: --libs (useBundled) or --fallback-libs (fromEnvironment), nothing without a bundle", () => {
  assert.equal(bundledLibsPath("/ext"), path.join("/ext", "bundled", "libs"));
  assert.deepEqual(libsArgs("useBundled", "/ext/bundled/libs"), ["--libs", "/ext/bundled/libs"]);
  assert.deepEqual(libsArgs("fromEnvironment", "/ext/bundled/libs"), ["--fallback-libs", "/ext/bundled/libs"]);
  assert.deepEqual(libsArgs("useBundled", undefined), []);
});

test("a python without gradguard runs the bundled server (real python, when bundled/libs is built)", async (t) => {
  const libs = bundledLibsPath(ROOT);
  if (!fs.existsSync(path.join(libs, "gradguard"))) {
    t.skip("bundled/libs not built (npm run bundle:server)");
    return;
  }
  // An interpreter with nothing installed: a venv without pip.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gg-bare-"));
  try {
    execFileSync(realPython(), ["-m", "venv", "--without-pip", dir]);
    const bare = path.join(dir, "bin", "python");
    assert.equal((await probeGradguard(bare, LAUNCHER)).installed, false);
    const bundled = await probeGradguard(bare, LAUNCHER, [], runProcess, undefined, libsArgs("useBundled", libs));
    assert.equal(bundled.installed, true, bundled.detail);
    assert.equal(bundled.source, "bundled");
    assert.deepEqual(bundled.flags, ["-I"]);
    const fallback = await probeGradguard(bare, LAUNCHER, [], runProcess, undefined, libsArgs("fromEnvironment", libs));
    assert.equal(fallback.source, "bundled");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("process environment: untrusted workspaces lose PYTHONPATH entries that are the cwd or in the workspace", () => {
  const env = { PYTHONPATH: ":/ws:/ws/src:rel:/opt/lib:/wsx", HOME: "/h" };
  assert.deepEqual(processEnv(env, false, ["/ws"], "linux"), { PYTHONPATH: "/opt/lib:/wsx", HOME: "/h", PYTHONUNBUFFERED: "1" });
  assert.deepEqual(processEnv(env, true, ["/ws"], "linux"), { ...env, PYTHONUNBUFFERED: "1" });
  assert.ok(!("PYTHONPATH" in processEnv({ PYTHONPATH: "/ws/src" }, false, ["/ws"], "linux")));
  assert.deepEqual(processEnv({ PYTHONPATH: "C:\\WS\\src;D:\\lib" }, false, ["c:\\ws"], "win32").PYTHONPATH, "D:\\lib");
});

test("runProcess runs in the directory it is given", async () => {
  const dir = fs.realpathSync(os.tmpdir());
  const r = await runProcess(realPython(), ["-c", "import os; print(os.getcwd())"], { cwd: dir });
  assert.equal(r.stdout.trim(), dir);
});

test("an interpreter that cannot start is reported with its error", () => {
  const p = parseProbe({ code: null, stdout: "", stderr: "", error: "spawn /x ENOENT" });
  assert.deepEqual(p, { installed: false, flags: [], python: undefined, source: undefined, detail: "spawn /x ENOENT" });
});
