import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";

import { PROBE, RunResult, Runner, bundledVenvDir, ensureBundled, installSpec, parseProbe, pipInstallArgs, venvPython } from "../src/environment";

test("the probe script reports a missing module and an installed one (real python)", () => {
  let python = "python3";
  try {
    execFileSync(python, ["--version"]);
  } catch {
    python = "python";
  }
  // sys is always there: rewrite the probe to import it under gradguard's name to check the success path.
  const ok = execFileSync(python, ["-c", "import sys, types; m = types.ModuleType('gradguard'); m.__version__ = '9.9'; sys.modules['gradguard'] = m\n" + PROBE]).toString();
  assert.deepEqual(parseProbe({ code: 0, stdout: ok, stderr: "" }), { installed: true, version: "9.9", detail: "gradguard:9.9" });
  let missing: RunResult;
  try {
    execFileSync(python, ["-c", "import sys; sys.path[:] = []\n" + PROBE], { env: { PYTHONPATH: "" } });
    missing = { code: 0, stdout: "", stderr: "" };
  } catch (e) {
    const err = e as { status: number; stdout: Buffer; stderr: Buffer };
    missing = { code: err.status, stdout: err.stdout.toString(), stderr: err.stderr.toString() };
  }
  const p = parseProbe(missing);
  assert.equal(p.installed, false);
  assert.match(p.detail, /ModuleNotFoundError: No module named 'gradguard'/);
});

test("an interpreter that cannot start is reported with its error", () => {
  const p = parseProbe({ code: null, stdout: "", stderr: "", error: "spawn /x ENOENT" });
  assert.deepEqual(p, { installed: false, detail: "spawn /x ENOENT" });
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
    run: async (cmd, args) => {
      calls.push([cmd, ...args.map((a) => (a === PROBE ? "<probe>" : a))].join(" "));
      return script(cmd, args);
    },
  };
}

test("first use creates the venv, installs gradguard and checks it", async () => {
  let installed = false;
  const { run, calls } = fakeRunner((_cmd, args) => {
    if (args[0] === "-c") {
      return installed ? { code: 0, stdout: "gradguard:0.1.0\n", stderr: "" } : { code: 3, stdout: "missing:ModuleNotFoundError\n", stderr: "" };
    }
    if (args.includes("pip")) {
      installed = true;
    }
    return { code: 0, stdout: "", stderr: "" };
  });
  const messages: string[] = [];
  const py = await ensureBundled({ basePython: "/usr/bin/python3", storageDir: "/s", extensionVersion: "0.1.0", platform: "linux", env: {}, exists: () => false, run, report: (m) => messages.push(m) });
  assert.equal(py, "/s/venv-0.1.0/bin/python");
  assert.deepEqual(calls, [
    "/usr/bin/python3 -m venv /s/venv-0.1.0",
    "/s/venv-0.1.0/bin/python -m pip install --disable-pip-version-check --no-input gradguard==0.1.0",
    "/s/venv-0.1.0/bin/python -c <probe>",
  ]);
  assert.equal(messages.length, 3);
});

test("an existing venv with gradguard is reused without installing", async () => {
  const { run, calls } = fakeRunner(() => ({ code: 0, stdout: "gradguard:0.1.0\n", stderr: "" }));
  const py = await ensureBundled({ basePython: "/py", storageDir: "/s", extensionVersion: "0.1.0", platform: "linux", env: {}, exists: () => true, run, report: () => undefined });
  assert.equal(py, "/s/venv-0.1.0/bin/python");
  assert.deepEqual(calls, ["/s/venv-0.1.0/bin/python -c <probe>"]);
});

test("a failing pip install is an error that carries pip's output", async () => {
  const { run } = fakeRunner((_c, args) => (args.includes("pip") ? { code: 1, stdout: "", stderr: "ERROR: No matching distribution found for gradguard==0.1.0" } : { code: 0, stdout: "", stderr: "" }));
  await assert.rejects(
    ensureBundled({ basePython: "/py", storageDir: "/s", extensionVersion: "0.1.0", platform: "linux", env: {}, exists: () => false, run, report: () => undefined }),
    /No matching distribution found/,
  );
});
