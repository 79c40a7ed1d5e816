import { test } from "node:test";
import * as assert from "node:assert/strict";

import { InterpreterInputs, expandVariables, findOnPath, isInside, resolveInterpreter, serverCommand } from "../src/interpreter";

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

test("the server is started through the launcher, with the probe's flags, outside the workspace", () => {
  const launcher = "/ext/client/launcher/launch.py";
  assert.deepEqual(serverCommand("/py", launcher, ["-I"], ["--log-level", "debug"], ["/ws", "/ws2"]), {
    command: "/py",
    args: ["-I", launcher, "--exclude", "/ws", "--exclude", "/ws2", "lsp", "--log-level", "debug"],
    cwd: "/ext/client/launcher",
  });
  assert.deepEqual(serverCommand("/py", launcher, ["-P"], []), { command: "/py", args: ["-P", launcher, "lsp"], cwd: "/ext/client/launcher" });
  assert.deepEqual(serverCommand("/py", launcher, ["-I"], [], ["/ws"], "/ext/bundled/libs").args, ["-I", launcher, "--libs", "/ext/bundled/libs", "--exclude", "/ws", "lsp"]);
  // Only the flags the launcher may ask for: a probe's output never becomes arbitrary interpreter options.
  assert.deepEqual(serverCommand("/py", launcher, ["-c", "-I", "evil"], []).args, ["-I", launcher, "lsp"]);
  assert.ok(!serverCommand("/py", launcher, [], []).args.includes("-m"), "never python -m gradguard: it imports from the working directory");
});

test("untrusted workspace: no interpreter from inside a workspace folder, whatever its source", () => {
  const ws = { trusted: false, workspaceFolders: ["/ws", "/other"] };
  const exes = ["/ws/.venv/bin/python", "/other/bin/python3", "/usr/bin/python3"];
  // ${workspaceFolder} in the user's (global) setting, the Python extension's pick and PATH all point inside.
  const r = resolveInterpreter(inputs({ ...ws, setting: "${workspaceFolder}/.venv/bin/python", pythonExtension: "/ws/.venv/bin/python", env: { PATH: "/other/bin:/usr/bin" }, executables: exes }));
  assert.deepEqual(r.interpreter, { path: "/usr/bin/python3", source: "path" });
  assert.equal(r.problems.length, 3, r.problems.join("\n"));
  assert.match(r.problems[0], /PATH directories inside the untrusted workspace are not searched: \/other\/bin/);
  assert.match(r.problems[1], /^gradguard.interpreter \/ws\/.venv\/bin\/python is inside the untrusted workspace folder \/ws/);
  assert.match(r.problems[2], /Python extension's interpreter \/ws\/.venv\/bin\/python is inside the untrusted workspace folder/);
  // A relative setting resolves inside the workspace too; a folder is not "inside" its sibling /wsx.
  assert.equal(resolveInterpreter(inputs({ ...ws, setting: ".venv/bin/python", executables: exes })).interpreter?.path, "/usr/bin/python3");
  assert.equal(resolveInterpreter(inputs({ ...ws, setting: "/wsx/bin/python", executables: ["/wsx/bin/python"] })).interpreter?.path, "/wsx/bin/python");
  // Trusted: the workspace's venv is what the user wants.
  assert.equal(resolveInterpreter(inputs({ trusted: true, workspaceFolders: ["/ws"], pythonExtension: "/ws/.venv/bin/python", executables: exes })).interpreter?.path, "/ws/.venv/bin/python");
});

test("isInside: the folder itself and what is below it, case-insensitively on Windows", () => {
  assert.ok(isInside("/ws", "/ws", "linux"));
  assert.ok(isInside("/ws/a/../b", "/ws", "linux"));
  assert.ok(!isInside("/ws/../etc", "/ws", "linux"));
  assert.ok(!isInside("/wsx/python", "/ws", "linux"));
  assert.ok(isInside("c:\\WS\\venv\\python.exe", "C:\\ws", "win32"));
});

test("empty and relative PATH entries (the working directory) are never searched", () => {
  const found = findOnPath("python3", { env: { PATH: ":.:bin:/usr/bin" }, platform: "linux", isExecutable: (p) => p === "python3" || p === "bin/python3" || p === "/usr/bin/python3" });
  assert.equal(found, "/usr/bin/python3");
});
