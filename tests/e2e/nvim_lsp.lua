-- Headless Neovim 0.11 against `python -m gradguard lsp` (run by tests/e2e/test_neovim.py):
--   nvim --headless --clean -u tests/e2e/nvim_lsp.lua
-- env: GG_PYTHON (interpreter with gradguard), GG_FILE (a copy of tests/e2e/workspace/model.py),
--      GG_EXPECT ("23:GG102,26:GG101": the labelled hazard lines),
--      GG_NVIM_MODE: "start" (vim.lsp.start, default) or "config" (vim.lsp.config + vim.lsp.enable).
-- Checks: diagnostics on exactly the labelled lines with their codes, hover text, the preferred quick fix
-- applied and the diagnostics updated, source.fixAll.gradguard applied and no diagnostics left; writes the file.
local python, file, expect_spec = os.getenv("GG_PYTHON"), os.getenv("GG_FILE"), os.getenv("GG_EXPECT")
local failures = 0

local function say(s)
  io.stdout:write(s .. "\n")
end

local function check(cond, what, detail)
  if cond then
    say("ok   " .. what)
  else
    failures = failures + 1
    say("FAIL " .. what .. (detail and ("\n     " .. tostring(detail)) or ""))
  end
  return cond
end

local function finish()
  io.stdout:flush()
  if failures > 0 then
    vim.cmd("cquit 1")
  else
    vim.cmd("qall!")
  end
end

local expect = {}
for line, code in (expect_spec or ""):gmatch("(%d+):(GG%d+)") do
  expect[tonumber(line)] = code
end

local mode = os.getenv("GG_NVIM_MODE") or "start"
local buf, client_id
if mode == "config" then
  -- The plain Neovim 0.11 configuration of docs/editors.md: vim.lsp.config + vim.lsp.enable.
  vim.lsp.config("gradguard", {
    cmd = { python, "-m", "gradguard", "lsp" },
    filetypes = { "python" },
    root_markers = { "pyproject.toml", "setup.py", ".git" },
    init_options = { run = "onType", debounceMs = 50 },
  })
  vim.lsp.enable("gradguard")
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].filetype = "python"
  vim.wait(10000, function()
    return #vim.lsp.get_clients({ bufnr = buf, name = "gradguard" }) > 0
  end, 50)
  local clients = vim.lsp.get_clients({ bufnr = buf, name = "gradguard" })
  client_id = clients[1] and clients[1].id
else
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].filetype = "python"
  client_id = vim.lsp.start({
    name = "gradguard",
    cmd = { python, "-m", "gradguard", "lsp" },
    root_dir = vim.fs.dirname(file),
    init_options = { select = vim.NIL, run = "onType", debounceMs = 50 },
  }, { bufnr = buf })
end
if not check(client_id ~= nil, "the gradguard client attached (" .. mode .. ")") then
  return finish()
end
local client = vim.lsp.get_client_by_id(client_id)

local function diags()
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    out[#out + 1] = d
  end
  table.sort(out, function(a, b)
    return a.lnum < b.lnum
  end)
  return out
end

local function describe(ds)
  local parts = {}
  for _, d in ipairs(ds) do
    parts[#parts + 1] = string.format("%d:%s", d.lnum + 1, tostring(d.code))
  end
  return table.concat(parts, ",")
end

local n_expect = vim.tbl_count(expect)
vim.wait(20000, function()
  return #diags() >= n_expect
end, 50)
local ds = diags()
local got = {}
for _, d in ipairs(ds) do
  got[d.lnum + 1] = d.code
end
check(vim.deep_equal(got, expect), "diagnostics on exactly the labelled lines " .. (expect_spec or ""), describe(ds))
for _, d in ipairs(ds) do
  check(d.source == "gradguard" and d.message:find("saved") ~= nil, "diagnostic " .. tostring(d.code) .. " has source and message", d.message)
end

local function find(code)
  for _, d in ipairs(diags()) do
    if d.code == code then
      return d
    end
  end
end

-- Hover on the GG101 hazard names the op that saved the tensor.
local d101 = find("GG101")
if check(d101 ~= nil, "a GG101 diagnostic to hover") then
  local res = vim.lsp.buf_request_sync(buf, "textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = d101.lnum, character = d101.col },
  }, 10000)
  local text = ""
  for _, r in pairs(res or {}) do
    if r.result and r.result.contents then
      text = text .. (r.result.contents.value or vim.inspect(r.result.contents))
    end
  end
  check(text:find("exp") ~= nil and text:find("saved") ~= nil and text:find("GG101") ~= nil, "hover names exp, what it saved and GG101", text:sub(1, 300))
end

local function code_actions(range, lsp_diags, only)
  local res = vim.lsp.buf_request_sync(buf, "textDocument/codeAction", {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = range,
    context = { diagnostics = lsp_diags, only = only },
  }, 10000)
  local actions = {}
  for _, r in pairs(res or {}) do
    for _, a in ipairs(r.result or {}) do
      actions[#actions + 1] = a
    end
  end
  return actions
end

-- The preferred quick fix for GG102, applied; then the diagnostics are updated.
local d102 = find("GG102")
if check(d102 ~= nil, "a GG102 diagnostic to fix") then
  local lsp_d = d102.user_data and d102.user_data.lsp
  local actions = code_actions(lsp_d.range, { lsp_d }, { "quickfix" })
  local preferred, titles = nil, {}
  for _, a in ipairs(actions) do
    titles[#titles + 1] = a.title
    if a.isPreferred then
      preferred = a
    end
  end
  check(#actions >= 2, "quick fixes offered: " .. table.concat(titles, " | "))
  if check(preferred ~= nil and preferred.edit ~= nil, "one quick fix is preferred and carries an edit") then
    vim.lsp.util.apply_workspace_edit(preferred.edit, client.offset_encoding)
    local line = vim.api.nvim_buf_get_lines(buf, d102.lnum, d102.lnum + 1, false)[1]
    check(line:find("inplace=True", 1, true) == nil, "the edit removed inplace=True", line)
    vim.wait(15000, function()
      return find("GG102") == nil and find("GG101") ~= nil
    end, 50)
    check(find("GG102") == nil and find("GG101") ~= nil, "diagnostics updated: GG102 gone, GG101 left", describe(diags()))
  end
end

-- source.fixAll.gradguard for the rest.
local all = code_actions({ start = { line = 0, character = 0 }, ["end"] = { line = 0, character = 0 } }, {}, { "source.fixAll.gradguard" })
if check(#all == 1 and all[1].edit ~= nil, "source.fixAll.gradguard offered with an edit", vim.inspect(all)) then
  vim.lsp.util.apply_workspace_edit(all[1].edit, client.offset_encoding)
  vim.wait(15000, function()
    return #diags() == 0
  end, 50)
  check(#diags() == 0, "no diagnostics after source.fixAll.gradguard", describe(diags()))
end

vim.cmd("write")
client:stop()
finish()
