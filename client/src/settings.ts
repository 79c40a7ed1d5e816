// Reading and validating the `gradguard.*` settings, and turning them into what the server understands
// (docs/lsp.md, "Settings").  No `vscode` import: everything here is unit-tested with node's test runner.

export type ImportStrategy = "fromEnvironment" | "useBundled";
export type Severity = "error" | "warning" | "info" | "hint";
export type ShowNotifications = "off" | "onError" | "onWarning" | "always";
export type Trace = "off" | "messages" | "verbose";
export type ConfigurationPreference = "filesystemFirst" | "editorFirst" | "editorOnly";
export type LogLevel = "error" | "warning" | "info" | "debug";

export interface Settings {
  enable: boolean;
  interpreter: string;
  importStrategy: ImportStrategy;
  args: string[];
  severity: Record<string, Severity>;
  lintOnChange: boolean;
  debounce: number | null;
  select: string[];
  ignore: string[];
  exclude: string[];
  configurationPreference: ConfigurationPreference;
  showNotifications: ShowNotifications;
  trace: Trace;
  logLevel: LogLevel;
  /** Where rule links point: "" for the pages of the installed gradguard, else a base URL (docs/lsp.md). */
  docsBaseUrl: string;
}

/** The settings object of docs/lsp.md, sent as initializationOptions and with didChangeConfiguration. */
export interface ServerSettings {
  enable: boolean;
  select: string[] | null;
  ignore: string[] | null;
  severity: Record<string, Severity>;
  run: "onType" | "onSave";
  debounceMs?: number;
  exclude: string[];
  configurationPreference: ConfigurationPreference;
  logLevel: LogLevel;
  docsBaseUrl?: string;
  /** VS Code's workspace trust: false makes the server refuse gradguard.runFile (docs/lsp.md). */
  workspaceTrusted?: boolean;
}

export const DEFAULTS: Readonly<Settings> = Object.freeze({
  enable: true,
  interpreter: "",
  importStrategy: "useBundled",
  args: [],
  severity: {},
  lintOnChange: true,
  debounce: null,
  select: [],
  ignore: [],
  exclude: [],
  configurationPreference: "filesystemFirst",
  showNotifications: "onError",
  trace: "off",
  logLevel: "info",
  docsBaseUrl: "",
});

/** `get(key)` returns the raw value of `gradguard.<key>` (undefined when unset). */
export type Getter = (key: string) => unknown;

const SEVERITY_ALIASES: Record<string, Severity> = {
  error: "error",
  warning: "warning",
  warn: "warning",
  info: "info",
  information: "info",
  hint: "hint",
};

function oneOf<T extends string>(value: unknown, allowed: readonly T[], fallback: T, problems: string[], key: string): T {
  if (value === undefined || value === null) {
    return fallback;
  }
  if (typeof value === "string" && (allowed as readonly string[]).includes(value)) {
    return value as T;
  }
  problems.push(`gradguard.${key}: expected one of ${allowed.join(", ")}, got ${JSON.stringify(value)}`);
  return fallback;
}

function bool(value: unknown, fallback: boolean, problems: string[], key: string): boolean {
  if (value === undefined || value === null) {
    return fallback;
  }
  if (typeof value === "boolean") {
    return value;
  }
  problems.push(`gradguard.${key}: expected true or false, got ${JSON.stringify(value)}`);
  return fallback;
}

function strings(value: unknown, problems: string[], key: string, upper = false): string[] {
  if (value === undefined || value === null) {
    return [];
  }
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) {
    const out = (value as string[]).map((v) => v.trim()).filter((v) => v.length > 0);
    return upper ? out.map((v) => v.toUpperCase()) : out;
  }
  problems.push(`gradguard.${key}: expected a list of strings, got ${JSON.stringify(value)}`);
  return [];
}

/** Reads every setting, replacing invalid values by their defaults; `problems` says what was replaced. */
export function readSettings(get: Getter): { settings: Settings; problems: string[] } {
  const problems: string[] = [];
  const interpreterRaw = get("interpreter");
  let interpreter = "";
  if (typeof interpreterRaw === "string") {
    interpreter = interpreterRaw.trim();
  } else if (Array.isArray(interpreterRaw) && interpreterRaw.length > 0 && typeof interpreterRaw[0] === "string") {
    // The Python tools extensions use a list ([path, ...extra args]); accept its first element.
    interpreter = interpreterRaw[0].trim();
  } else if (interpreterRaw !== undefined && interpreterRaw !== null) {
    problems.push(`gradguard.interpreter: expected a path, got ${JSON.stringify(interpreterRaw)}`);
  }

  const severity: Record<string, Severity> = {};
  const sevRaw = get("severity");
  if (sevRaw !== undefined && sevRaw !== null) {
    if (typeof sevRaw === "object" && !Array.isArray(sevRaw)) {
      for (const [code, level] of Object.entries(sevRaw as Record<string, unknown>)) {
        const norm = typeof level === "string" ? SEVERITY_ALIASES[level.toLowerCase()] : undefined;
        if (norm && code.trim()) {
          severity[code.trim().toUpperCase()] = norm;
        } else {
          problems.push(`gradguard.severity.${code}: expected error, warning, info or hint, got ${JSON.stringify(level)}`);
        }
      }
    } else {
      problems.push(`gradguard.severity: expected an object like {"GG101": "error"}, got ${JSON.stringify(sevRaw)}`);
    }
  }

  let debounce: number | null = null;
  const debRaw = get("debounce");
  if (typeof debRaw === "number" && Number.isFinite(debRaw) && debRaw >= 0) {
    debounce = Math.round(debRaw);
  } else if (debRaw !== undefined && debRaw !== null) {
    problems.push(`gradguard.debounce: expected a number of milliseconds >= 0, got ${JSON.stringify(debRaw)}`);
  }

  const settings: Settings = {
    enable: bool(get("enable"), DEFAULTS.enable, problems, "enable"),
    interpreter,
    importStrategy: oneOf(get("importStrategy"), ["fromEnvironment", "useBundled"] as const, DEFAULTS.importStrategy, problems, "importStrategy"),
    args: strings(get("args"), problems, "args"),
    severity,
    lintOnChange: bool(get("lintOnChange"), DEFAULTS.lintOnChange, problems, "lintOnChange"),
    debounce,
    select: strings(get("select"), problems, "select", true),
    ignore: strings(get("ignore"), problems, "ignore", true),
    exclude: strings(get("exclude"), problems, "exclude"),
    configurationPreference: oneOf(
      get("configurationPreference"),
      ["filesystemFirst", "editorFirst", "editorOnly"] as const,
      DEFAULTS.configurationPreference,
      problems,
      "configurationPreference",
    ),
    showNotifications: oneOf(get("showNotifications"), ["off", "onError", "onWarning", "always"] as const, DEFAULTS.showNotifications, problems, "showNotifications"),
    trace: oneOf(get("trace.server"), ["off", "messages", "verbose"] as const, DEFAULTS.trace, problems, "trace.server"),
    logLevel: oneOf(get("logLevel"), ["error", "warning", "info", "debug"] as const, DEFAULTS.logLevel, problems, "logLevel"),
    docsBaseUrl: typeof get("docsBaseUrl") === "string" ? String(get("docsBaseUrl")).trim() : DEFAULTS.docsBaseUrl,
  };
  return { settings, problems };
}

/**
 * The settings object the server reads (docs/lsp.md): empty select/ignore mean "from pyproject.toml".
 * `trusted` is whether the workspace is trusted (not a user setting: the editor decides it).
 */
export function toServerSettings(s: Settings, trusted?: boolean): ServerSettings {
  const out: ServerSettings = {
    enable: s.enable,
    select: s.select.length > 0 ? [...s.select] : null,
    ignore: s.ignore.length > 0 ? [...s.ignore] : null,
    severity: { ...s.severity },
    run: s.lintOnChange ? "onType" : "onSave",
    exclude: [...s.exclude],
    configurationPreference: s.configurationPreference,
    logLevel: s.logLevel,
  };
  if (s.docsBaseUrl) {
    out.docsBaseUrl = s.docsBaseUrl;
  }
  if (s.debounce !== null) {
    out.debounceMs = s.debounce;
  }
  if (trusted !== undefined) {
    out.workspaceTrusted = trusted;
  }
  return out;
}

/** Settings that decide which process runs: changing one needs a new server process. */
const RESTART_KEYS: readonly (keyof Settings)[] = ["interpreter", "importStrategy", "args"];

export type ChangeAction = "none" | "notify" | "restart" | "start" | "stop";

/**
 * What to do when the settings change from `before` to `after`:
 * "start"/"stop" when `enable` flips, "restart" when the server process must change, "notify" when the
 * running server only needs didChangeConfiguration (or the client a new trace level), "none" otherwise.
 */
export function changeAction(before: Settings, after: Settings): ChangeAction {
  if (before.enable !== after.enable) {
    return after.enable ? "start" : "stop";
  }
  if (!after.enable) {
    return "none";
  }
  for (const key of RESTART_KEYS) {
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) {
      return "restart";
    }
  }
  if (JSON.stringify(toServerSettings(before)) !== JSON.stringify(toServerSettings(after)) || before.trace !== after.trace) {
    return "notify";
  }
  return "none";
}

/** Whether a notification of `level` is shown as a popup under the `showNotifications` setting. */
export function shouldNotify(setting: ShowNotifications, level: "error" | "warning" | "info"): boolean {
  switch (setting) {
    case "off":
      return false;
    case "onError":
      return level === "error";
    case "onWarning":
      return level === "error" || level === "warning";
    case "always":
      return true;
  }
}
