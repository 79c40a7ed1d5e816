import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import { RunResult, Runner, bundledVenvDir, ensureBundled, installSpec, launcherPath, parseProbe, pipInstallArgs, probeGradguard, processEnv, runProcess, safeCwd, venvPython } from "../src/environment";

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
  assert.deepEqual(parseProbe({ code: 0, stdout: "python:3.12.1\nflags:-I\ngradguard:9.9\n", stderr: "" }), {
    installed: true,
    version: "9.9",
    flags: ["-I"],
    python: "3.12.1",
    detail: "gradguard:9.9",
  });
  assert.deepEqual(parseProbe({ code: 3, stdout: "python:3.10.2\nflags:\nmissing:ModuleNotFoundError: No module named 'gradguard'\n", stderr: "" }), {
    installed: false,
    flags: [],
    python: "3.10.2",
    detail: "ModuleNotFoundError: No module named 'gradguard'",
  });
  assert.deepEqual(parseProbe({ code: 0, stdout: "flags:-P -X evil\ngradguard:1\n", stderr: "" }).flags, ["-P"]);
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
  assert.deepEqual(p, { installed: false, flags: [], python: undefined, detail: "spawn /x ENOENT" });
});

test("install spec: pinned for the bundled venv, overridable", () => {
  assert.equal(installSpec({}, "0.1.0"), "gradguard==0.1.0");
  assert.equal(installSpec({}, undefined), "gradguard");
  assert.equal(installSpec({ GRADGUARD_INSTALL_SPEC: "-e /src/gradguard" }, "0.1.0"), "-e /src/gradguard");
  assert.deepEqual(pipInstallArgs("-e /src"), ["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-e", "/src"]);
});

test("venv layout per platform and version", () => {
  assert.equal(bundledVenvDir("/store", "0.1.0"), "/store/venv-0.1.0");
  assert.equal(venvPython("/store/venv-0.1.0", "linux"), "/store/venv-0.1.0/bin/python");
  assert.equal(venvPython("C:\\s\\venv", "win32"), "C:\\s\\venv\\Scripts\\python.exe");
});

function fakeRunner(script: (cmd: string, args: string[]) => RunResult): { run: Runner; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    run: async (cmd, args, options) => {
      calls.push([`[${options.cwd}]`, cmd, ...args].join(" "));
      return script(cmd, args);
    },
  };
}

const L = "/ext/client/launcher/launch.py";
const OK = { code: 0, stdout: "python:3.12.0\nflags:-I\ngradguard:0.1.0\n", stderr: "" };

test("first use creates the venv, installs gradguard and checks it, isolated and outside the workspace", async () => {
  let installed = false;
  const { run, calls } = fakeRunner((_cmd, args) => {
    if (args.includes("--probe")) {
      return installed ? OK : { code: 3, stdout: "missing:ModuleNotFoundError\n", stderr: "" };
    }
    if (args.includes("pip")) {
      installed = true;
    }
    return { code: 0, stdout: "", stderr: "" };
  });
  const messages: string[] = [];
  const got = await ensureBundled({ basePython: "/usr/bin/python3", launcher: L, exclude: ["/ws"], storageDir: "/s", extensionVersion: "0.1.0", platform: "linux", env: {}, exists: () => false, run, report: (m) => messages.push(m) });
  assert.equal(got.python, "/s/venv-0.1.0/bin/python");
  assert.deepEqual(got.probe.flags, ["-I"]);
  assert.deepEqual(calls, [
    "[/ext/client/launcher] /usr/bin/python3 -I -m venv /s/venv-0.1.0",
    "[/ext/client/launcher] /s/venv-0.1.0/bin/python -I -m pip install --disable-pip-version-check --no-input gradguard==0.1.0",
    `[/ext/client/launcher] /s/venv-0.1.0/bin/python ${L} --exclude /ws --probe`,
  ]);
  assert.equal(messages.length, 3);
});

test("an existing venv with gradguard is reused without installing", async () => {
  const { run, calls } = fakeRunner(() => OK);
  const got = await ensureBundled({ basePython: "/py", launcher: L, storageDir: "/s", extensionVersion: "0.1.0", platform: "linux", env: {}, exists: () => true, run, report: () => undefined });
  assert.equal(got.python, "/s/venv-0.1.0/bin/python");
  assert.deepEqual(calls, [`[/ext/client/launcher] /s/venv-0.1.0/bin/python ${L} --probe`]);
});

test("a failing pip install is an error that carries pip's output", async () => {
  const { run } = fakeRunner((_c, args) => (args.includes("pip") ? { code: 1, stdout: "", stderr: "ERROR: No matching distribution found for gradguard==0.1.0" } : { code: 0, stdout: "", stderr: "" }));
  await assert.rejects(
    ensureBundled({ basePython: "/py", launcher: L, storageDir: "/s", extensionVersion: "0.1.0", platform: "linux", env: {}, exists: () => false, run, report: () => undefined }),
    /No matching distribution found/,
  );
});
