// Optional integration with the Python extension (ms-python.python): read the interpreter it has selected
// and follow changes.  The extension is never a hard dependency (no extensionDependencies: VSCodium and
// Open VSX users may not have it); when it is absent everything here returns undefined.

import * as vscode from "vscode";

const PYTHON_EXTENSION_ID = "ms-python.python";

interface EnvironmentPath {
  readonly id: string;
  readonly path: string;
}

interface ResolvedEnvironment {
  readonly executable: { readonly uri?: vscode.Uri };
}

interface PythonApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): EnvironmentPath;
    resolveEnvironment(env: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
    readonly onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

async function api(): Promise<PythonApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonApi>(PYTHON_EXTENSION_ID);
  if (!ext) {
    return undefined;
  }
  try {
    return ext.isActive ? ext.exports : await ext.activate();
  } catch {
    return undefined;
  }
}

/** The executable of the interpreter the Python extension selected for `resource`, if any. */
export async function selectedInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const envs = (await api())?.environments;
  if (!envs) {
    return undefined;
  }
  try {
    const active = envs.getActiveEnvironmentPath(resource);
    const resolved = await envs.resolveEnvironment(active);
    return resolved?.executable.uri?.fsPath ?? active.path;
  } catch {
    return undefined;
  }
}

/** Calls `listener` when the user selects another interpreter in the Python extension. */
export async function onDidChangeInterpreter(listener: () => void): Promise<vscode.Disposable | undefined> {
  const envs = (await api())?.environments;
  return envs?.onDidChangeActiveEnvironmentPath(() => listener());
}
