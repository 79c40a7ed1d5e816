import { test } from "node:test";
import * as assert from "node:assert/strict";

import { InterpreterInputs, expandVariables, findOnPath, resolveInterpreter, serverCommand } from "../src/interpreter";

function inputs(over: Partial<InterpreterInputs> & { executables?: string[] }): InterpreterInputs {
  const exe = new Set(over.executables ?? []);
  return {
    setting: "",
    workspaceFolder: "/ws",
    env: { PATH: "/usr/local/bin:/usr/bin" },
    home: "/home/u",
    platform: "linux",
    isExecutable: (p) => exe.has(p),
    ...over,
  };
}

test("the setting wins over the Python extension and PATH", () => {
  const r = resolveInterpreter(inputs({ setting: "/opt/py/bin/python", pythonExtension: "/ext/python", executables: ["/opt/py/bin/python", "/ext/python", "/usr/bin/python3"] }));
  assert.deepEqual(r.interpreter, { path: "/opt/py/bin/python", source: "setting" });
  assert.deepEqual(r.problems, []);
});

test("the Python extension's interpreter is used when the setting is empty", () => {
  const r = resolveInterpreter(inputs({ pythonExtension: "/ws/.venv/bin/python", executables: ["/ws/.venv/bin/python", "/usr/bin/python3"] }));
  assert.deepEqual(r.interpreter, { path: "/ws/.venv/bin/python", source: "pythonExtension" });
});

test("python3 before python on PATH, in PATH order", () => {
  const r = resolveInterpreter(inputs({ executables: ["/usr/bin/python", "/usr/bin/python3", "/usr/local/bin/python"] }));
  assert.deepEqual(r.interpreter, { path: "/usr/bin/python3", source: "path" });
  const r2 = resolveInterpreter(inputs({ executables: ["/usr/bin/python", "/usr/local/bin/python"] }));
  assert.deepEqual(r2.interpreter, { path: "/usr/local/bin/python", source: "path" });
});

test("a setting that does not exist is reported and the next candidate is used", () => {
  const r = resolveInterpreter(inputs({ setting: "/nope/python", pythonExtension: "/gone/python", executables: ["/usr/bin/python3"] }));
  assert.deepEqual(r.interpreter, { path: "/usr/bin/python3", source: "path" });
  assert.equal(r.problems.length, 2);
  assert.match(r.problems[0], /gradguard.interpreter "\/nope\/python"/);
  assert.match(r.problems[1], /\/gone\/python/);
});

test("nothing found: no interpreter and a reason", () => {
  const r = resolveInterpreter(inputs({ executables: [] }));
  assert.equal(r.interpreter, undefined);
  assert.match(r.problems.at(-1) ?? "", /python3 or python/);
});

test("variables, ~ and workspace-relative paths in the setting", () => {
  const env = { PATH: "/usr/bin", VENV: "/envs/a" };
  assert.equal(expandVariables("${workspaceFolder}/.venv/bin/python", { workspaceFolder: "/ws", env, home: "/h" }), "/ws/.venv/bin/python");
  assert.equal(expandVariables("~/py/bin/python", { env, home: "/h" }), "/h/py/bin/python");
  assert.equal(expandVariables("${userHome}/x", { env, home: "/h" }), "/h/x");
  assert.equal(expandVariables("${env:VENV}/bin/python", { env, home: "/h" }), "/envs/a/bin/python");
  assert.equal(expandVariables("${env:MISSING}x", { env, home: "/h" }), "x");
  const rel = resolveInterpreter(inputs({ setting: ".venv/bin/python", executables: ["/ws/.venv/bin/python"] }));
  assert.deepEqual(rel.interpreter, { path: "/ws/.venv/bin/python", source: "setting" });
  const tilde = resolveInterpreter(inputs({ setting: "~/.venv/bin/python", executables: ["/home/u/.venv/bin/python"] }));
  assert.equal(tilde.interpreter?.path, "/home/u/.venv/bin/python");
});

test("a bare name in the setting is looked up on PATH", () => {
  const r = resolveInterpreter(inputs({ setting: "python3.11", executables: ["/usr/bin/python3.11", "/usr/bin/python3"] }));
  assert.deepEqual(r.interpreter, { path: "/usr/bin/python3.11", source: "setting" });
});

test("Windows: PATHEXT and ; separators, python before python3", () => {
  const exe = new Set(["C:\\Py\\python.exe", "C:\\Py\\python3.exe"]);
  const found = findOnPath("python", { env: { Path: "C:\\Tools;C:\\Py", PATHEXT: ".COM;.EXE" }, platform: "win32", isExecutable: (p) => exe.has(p) });
  assert.equal(found, "C:\\Py\\python.exe");
  const r = resolveInterpreter({ ...inputs({}), platform: "win32", env: { Path: "C:\\Py", PATHEXT: ".EXE" }, isExecutable: (p) => exe.has(p) });
  assert.deepEqual(r.interpreter, { path: "C:\\Py\\python.exe", source: "path" });
});

test("the server is started as python -m gradguard lsp plus the user's args", () => {
  assert.deepEqual(serverCommand("/py", ["--log-level", "debug"]), { command: "/py", args: ["-m", "gradguard", "lsp", "--log-level", "debug"] });
});
