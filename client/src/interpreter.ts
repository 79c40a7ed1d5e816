// Which Python interpreter runs the gradguard server.  Order (the conventions of the Python tools extensions):
//   1. the `gradguard.interpreter` setting;
//   2. the interpreter selected in the Python extension, when that extension is installed (never required);
//   3. `python3`, then `python`, on PATH.
// No `vscode` import: the caller passes in what the editor knows, and this module is unit-tested.

import * as path from "path";

export type InterpreterSource = "setting" | "pythonExtension" | "path";

export interface Interpreter {
  path: string;
  source: InterpreterSource;
}

export interface InterpreterInputs {
  /** Value of `gradguard.interpreter` ("" when unset). */
  setting: string;
  /** Executable the Python extension has selected for this workspace; undefined when it is absent or has none. */
  pythonExtension?: string;
  /** Absolute path of the (first) workspace folder, for `${workspaceFolder}` and relative paths. */
  workspaceFolder?: string;
  env: Record<string, string | undefined>;
  home: string;
  platform: NodeJS.Platform;
  /** Whether `p` is an existing executable file. */
  isExecutable: (p: string) => boolean;
}

export interface Resolution {
  interpreter?: Interpreter;
  /** Why earlier candidates were skipped (shown in the output channel, and as a warning for a bad setting). */
  problems: string[];
}

/** Expands `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~`, like the Python extensions do. */
export function expandVariables(value: string, inputs: Pick<InterpreterInputs, "workspaceFolder" | "env" | "home">): string {
  let out = value.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g, (whole, name: string, envName?: string) => {
    if (name === "workspaceFolder") {
      return inputs.workspaceFolder ?? whole;
    }
    if (name === "userHome") {
      return inputs.home;
    }
    return envName !== undefined ? (inputs.env[envName] ?? "") : whole;
  });
  if (out === "~" || out.startsWith("~/") || out.startsWith("~\\")) {
    out = inputs.home + out.slice(1);
  }
  return out;
}

/** Searches PATH for `name` (adding PATHEXT extensions on Windows); undefined when not found. */
export function findOnPath(name: string, inputs: Pick<InterpreterInputs, "env" | "platform" | "isExecutable">): string | undefined {
  const win = inputs.platform === "win32";
  const p = win ? path.win32 : path.posix;
  const pathVar = inputs.env.PATH ?? inputs.env.Path ?? "";
  const exts = win ? ["", ...(inputs.env.PATHEXT ?? ".EXE;.CMD;.BAT").split(";").filter(Boolean).map((e) => e.toLowerCase())] : [""];
  for (const dir of pathVar.split(win ? ";" : ":")) {
    if (!dir) {
      continue;
    }
    for (const ext of exts) {
      const candidate = p.join(dir, name + ext);
      if (inputs.isExecutable(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

/** Resolves the `gradguard.interpreter` setting: a path (absolute, `~`, relative to the workspace) or a bare name. */
export function resolveSetting(setting: string, inputs: InterpreterInputs): string | undefined {
  const expanded = expandVariables(setting.trim(), inputs);
  if (!expanded) {
    return undefined;
  }
  const p = inputs.platform === "win32" ? path.win32 : path.posix;
  const hasSep = expanded.includes("/") || (inputs.platform === "win32" && expanded.includes("\\"));
  if (!hasSep) {
    return findOnPath(expanded, inputs);
  }
  const abs = p.isAbsolute(expanded) ? expanded : p.resolve(inputs.workspaceFolder ?? inputs.home, expanded);
  return inputs.isExecutable(abs) ? abs : undefined;
}

export function resolveInterpreter(inputs: InterpreterInputs): Resolution {
  const problems: string[] = [];
  if (inputs.setting.trim()) {
    const found = resolveSetting(inputs.setting, inputs);
    if (found) {
      return { interpreter: { path: found, source: "setting" }, problems };
    }
    problems.push(`gradguard.interpreter "${inputs.setting}" is not an executable file; trying the next candidates.`);
  }
  if (inputs.pythonExtension) {
    if (inputs.isExecutable(inputs.pythonExtension)) {
      return { interpreter: { path: inputs.pythonExtension, source: "pythonExtension" }, problems };
    }
    problems.push(`The Python extension's interpreter ${inputs.pythonExtension} is not an executable file.`);
  }
  const names = inputs.platform === "win32" ? ["python", "py", "python3"] : ["python3", "python"];
  for (const name of names) {
    const found = findOnPath(name, inputs);
    if (found) {
      return { interpreter: { path: found, source: "path" }, problems };
    }
  }
  problems.push(`No ${names.join(" or ")} on PATH.`);
  return { problems };
}

/** The command line that starts the server with `python`. */
export function serverCommand(python: string, extraArgs: readonly string[]): { command: string; args: string[] } {
  return { command: python, args: ["-m", "gradguard", "lsp", ...extraArgs] };
}
