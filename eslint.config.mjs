// ESLint flat config for the VS Code client (TypeScript) and the editor end-to-end scripts (ESM JavaScript).
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  { ignores: ["client/out/**", "node_modules/**", ".cache/**", "artifacts/**", "*.vsix"] },
  js.configs.recommended,
  {
    files: ["client/**/*.ts"],
    extends: [...tseslint.configs.recommended],
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      eqeqeq: ["error", "always"],
      curly: "error",
    },
  },
  {
    files: ["tests/e2e/**/*.mjs", "eslint.config.mjs"],
    // page.evaluate callbacks run in the browser: document is a global there.
    languageOptions: { globals: { ...globals.node, document: "readonly" }, sourceType: "module" },
    rules: { eqeqeq: ["error", "always"] },
  },
);
