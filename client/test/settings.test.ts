import { test } from "node:test";
import * as assert from "node:assert/strict";

import { DEFAULTS, Settings, changeAction, readSettings, shouldNotify, toServerSettings } from "../src/settings";

const from = (values: Record<string, unknown>) => readSettings((key) => values[key]);

test("defaults when nothing is set", () => {
  const { settings, problems } = from({});
  assert.deepEqual(settings, { ...DEFAULTS });
  assert.deepEqual(problems, []);
});

test("valid values are read and normalised", () => {
  const { settings, problems } = from({
    enable: false,
    interpreter: "  /py  ",
    importStrategy: "fromEnvironment",
    args: ["--log-level", "debug"],
    severity: { gg1: "error", GG202: "information", GG301: "warn" },
    lintOnChange: false,
    debounce: 250.4,
    select: ["gg1", " GG301 ", ""],
    ignore: ["GG202"],
    exclude: ["generated/"],
    configurationPreference: "editorFirst",
    showNotifications: "always",
    "trace.server": "verbose",
    logLevel: "debug",
    docsBaseUrl: " https://example.org/rules/ ",
  });
  assert.deepEqual(problems, []);
  assert.equal(settings.importStrategy, "fromEnvironment");
  assert.equal(settings.logLevel, "debug");
  assert.equal(toServerSettings(settings).docsBaseUrl, "https://example.org/rules/");
  assert.equal(settings.interpreter, "/py");
  assert.deepEqual(settings.severity, { GG1: "error", GG202: "info", GG301: "warning" });
  assert.deepEqual(settings.select, ["GG1", "GG301"]);
  assert.equal(settings.debounce, 250);
  assert.equal(settings.trace, "verbose");
});

test("the Python tools' list form of interpreter is accepted", () => {
  assert.equal(from({ interpreter: ["/venv/bin/python"] }).settings.interpreter, "/venv/bin/python");
});

test("invalid values fall back to defaults and are reported", () => {
  const { settings, problems } = from({
    enable: "yes",
    importStrategy: "bundled",
    args: "--x",
    severity: { GG101: "fatal" },
    debounce: -5,
    select: [1, 2],
    showNotifications: "sometimes",
    "trace.server": true,
    logLevel: "loud",
  });
  assert.equal(settings.enable, true);
  assert.equal(settings.importStrategy, "useBundled");
  assert.equal(settings.logLevel, "info");
  assert.deepEqual(settings.args, []);
  assert.deepEqual(settings.severity, {});
  assert.equal(settings.debounce, null);
  assert.deepEqual(settings.select, []);
  assert.equal(settings.showNotifications, "onError");
  assert.equal(settings.trace, "off");
  assert.equal(problems.length, 9);
  assert.ok(problems.some((p) => p.startsWith("gradguard.importStrategy")));
  assert.ok(problems.some((p) => p.startsWith("gradguard.severity.GG101")));
});

test("server settings follow docs/lsp.md: empty select/ignore mean pyproject, lintOnChange -> run", () => {
  const base = toServerSettings({ ...DEFAULTS });
  assert.deepEqual(base, { enable: true, select: null, ignore: null, severity: {}, run: "onType", exclude: [], configurationPreference: "filesystemFirst", logLevel: "info" });
  const s: Settings = { ...DEFAULTS, lintOnChange: false, debounce: 0, select: ["GG1"], ignore: ["GG102"], severity: { GG1: "error" } };
  assert.deepEqual(toServerSettings(s), {
    enable: true,
    select: ["GG1"],
    ignore: ["GG102"],
    severity: { GG1: "error" },
    run: "onSave",
    debounceMs: 0,
    exclude: [],
    configurationPreference: "filesystemFirst",
    logLevel: "info",
  });
});

test("the workspace's trust goes to the server when the editor knows it", () => {
  assert.equal(toServerSettings({ ...DEFAULTS }, false).workspaceTrusted, false);
  assert.equal(toServerSettings({ ...DEFAULTS }, true).workspaceTrusted, true);
  assert.ok(!("workspaceTrusted" in toServerSettings({ ...DEFAULTS })));
});

test("which changes restart the server and which are sent to it", () => {
  const base: Settings = { ...DEFAULTS };
  assert.equal(changeAction(base, { ...base }), "none");
  assert.equal(changeAction(base, { ...base, interpreter: "/other" }), "restart");
  assert.equal(changeAction(base, { ...base, importStrategy: "fromEnvironment" }), "restart");
  assert.equal(changeAction(base, { ...base, logLevel: "debug" }), "notify");
  assert.equal(changeAction(base, { ...base, args: ["--log-level", "debug"] }), "restart");
  assert.equal(changeAction(base, { ...base, select: ["GG1"] }), "notify");
  assert.equal(changeAction(base, { ...base, severity: { GG101: "error" } }), "notify");
  assert.equal(changeAction(base, { ...base, lintOnChange: false }), "notify");
  assert.equal(changeAction(base, { ...base, trace: "messages" }), "notify");
  assert.equal(changeAction(base, { ...base, showNotifications: "off" }), "none");
  assert.equal(changeAction(base, { ...base, enable: false }), "stop");
  assert.equal(changeAction({ ...base, enable: false }, base), "start");
  assert.equal(changeAction({ ...base, enable: false }, { ...base, enable: false, interpreter: "/x" }), "none");
});

test("showNotifications levels", () => {
  assert.equal(shouldNotify("off", "error"), false);
  assert.equal(shouldNotify("onError", "error"), true);
  assert.equal(shouldNotify("onError", "warning"), false);
  assert.equal(shouldNotify("onWarning", "warning"), true);
  assert.equal(shouldNotify("onWarning", "info"), false);
  assert.equal(shouldNotify("always", "info"), true);
});
