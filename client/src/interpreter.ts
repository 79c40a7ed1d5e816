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
  /**
   * false in an untrusted workspace (VS Code's Restricted Mode): then no interpreter inside one of
   * `workspaceFolders` is used, wherever it comes from (a `${workspaceFolder}/.venv/bin/python` in the user
   * settings, the Python extension, PATH): a workspace's own python, or its venv's `.pth` files, run its code.
   */
  trusted?: boolean;
  /** Absolute paths of all the workspace folders (for `trusted: false`). */
  workspaceFolders?: readonly string[];
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
    // An empty or relative PATH entry means the working directory: never look for python there.
    if (!dir || !p.isAbsolute(dir)) {
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

/** Whether `file` is `folder` or inside it. */
export function isInside(file: string, folder: string, platform: NodeJS.Platform): boolean {
  const p = platform === "win32" ? path.win32 : path.posix;
  const norm = (x: string) => (platform === "win32" ? p.resolve(x).toLowerCase() : p.resolve(x));
  const rel = p.relative(norm(folder), norm(file));
  return rel === "" || (!rel.startsWith("..") && !p.isAbsolute(rel));
}

export function resolveInterpreter(inputs: InterpreterInputs): Resolution {
  const problems: string[] = [];
  const untrustedFolder = (file: string): string | undefined =>
    inputs.trusted === false ? (inputs.workspaceFolders ?? []).find((f) => isInside(file, f, inputs.platform)) : undefined;
  const usable = (file: string, what: string): boolean => {
    const folder = untrustedFolder(file);
    if (folder) {
      problems.push(`${what} ${file} is inside the untrusted workspace folder ${folder}: not used (it could run the workspace's code).`);
    }
    return !folder;
  };
  if (inputs.trusted === false) {
    // PATH directories inside the workspace (an activated workspace venv) are not searched.
    const sep = inputs.platform === "win32" ? ";" : ":";
    const dirs = (inputs.env.PATH ?? inputs.env.Path ?? "").split(sep);
    const kept = dirs.filter((d) => !d || !untrustedFolder(d));
    if (kept.length !== dirs.length) {
      problems.push(`PATH directories inside the untrusted workspace are not searched: ${dirs.filter((d) => !kept.includes(d)).join(", ")}.`);
      inputs = { ...inputs, env: { ...inputs.env, PATH: kept.join(sep) } };
    }
  }
  if (inputs.setting.trim()) {
    const found = resolveSetting(inputs.setting, inputs);
    if (found) {
      if (usable(found, "gradguard.interpreter")) {
        return { interpreter: { path: found, source: "setting" }, problems };
      }
    } else {
      problems.push(`gradguard.interpreter "${inputs.setting}" is not an executable file; trying the next candidates.`);
    }
  }
  if (inputs.pythonExtension) {
    if (!inputs.isExecutable(inputs.pythonExtension)) {
      problems.push(`The Python extension's interpreter ${inputs.pythonExtension} is not an executable file.`);
    } else if (usable(inputs.pythonExtension, "The Python extension's interpreter")) {
      return { interpreter: { path: inputs.pythonExtension, source: "pythonExtension" }, problems };
    }
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

/** The flags client/launcher/launch.py may ask for on its `flags:` line (anything else is ignored). */
export const LAUNCH_FLAGS: readonly string[] = ["-I", "-P"];

export interface ServerCommand {
  command: string;
  args: string[];
  /** The launcher's directory: never the workspace (see client/launcher/launch.py). */
  cwd: string;
}

/**
 * The command line that starts the server: `python [-I|-P] <launcher> [--libs DIR] [--exclude FOLDER]... lsp
 * [extraArgs]`, run in the launcher's directory.  `flags` are those the launcher's `--probe` printed for this
 * interpreter; `workspaceFolders` are removed from the server's sys.path; `libs` is the bundled server's directory
 * when the probe chose it (put first on sys.path).  client/launcher/launch.py says why.
 */
export function serverCommand(
  python: string,
  launcher: string,
  flags: readonly string[],
  extraArgs: readonly string[],
  workspaceFolders: readonly string[] = [],
  libs?: string,
): ServerCommand {
  return {
    command: python,
    args: [
      ...flags.filter((f) => LAUNCH_FLAGS.includes(f)),
      launcher,
      ...(libs ? ["--libs", libs] : []),
      ...workspaceFolders.flatMap((f) => ["--exclude", f]),
      "lsp",
      ...extraArgs,
    ],
    cwd: path.dirname(launcher),
  };
}
