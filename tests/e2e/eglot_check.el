;; Manual check of the eglot configuration in docs/editors.md (Debian emacs-nox 28.2 + elpa-eglot 1.9):
;;   GG_PYTHON=.venv/bin/python GG_FILE=/tmp/model.py emacs --batch -l tests/e2e/eglot_check.el
;; (GG_FILE: a copy of tests/e2e/workspace/model.py). Prints the flymake diagnostics eglot received.
(require 'package)
(package-initialize)
(require 'eglot)
(require 'python)
(setq python (or (getenv "GG_PYTHON") "python3"))
(add-to-list 'eglot-server-programs
             `((python-mode python-ts-mode) . (,python "-m" "gradguard" "lsp" :initializationOptions (:run "onType"))))
(find-file (getenv "GG_FILE"))
(python-mode)
(apply #'eglot (eglot--guess-contact))
(let ((deadline (+ (float-time) 30)))
  (while (and (< (float-time) deadline) (null (flymake-diagnostics)))
    (accept-process-output nil 0.2)))
(let ((diags (flymake-diagnostics)))
  (dolist (d diags)
    (princ (format "DIAG line %d: %s\n" (line-number-at-pos (flymake-diagnostic-beg d)) (flymake-diagnostic-text d))))
  (princ (format "COUNT %d\n" (length diags))))
(kill-emacs 0)
