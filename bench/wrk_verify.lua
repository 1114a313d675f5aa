-- wrk script for the static-files workload: every response must be 200 with exactly the bytes
-- of the file on disk, or the run has no result.
--   wrk -t1 -c16 -d10s -s wrk_verify.lua http://127.0.0.1:PORT/name -- /path/to/the/served/file
-- Prints one key=value line at the end for bench/run.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local path = args[1]
  if not path then
    error("wrk_verify.lua: pass the served file's path after --")
  end
  local f = assert(io.open(path, "rb"))
  expected = f:read("*a")
  f:close()
  good = 0
  bad = 0
  first_bad = ""
end

function response(status, headers, body)
  -- LuaJIT interns strings, so equal content compares fully once per response, as it must.
  if status == 200 and body == expected then
    good = good + 1
  else
    bad = bad + 1
    if first_bad == "" then
      first_bad = "status=" .. status .. ",len=" .. (body and #body or -1)
    end
  end
end

function done(summary, latency, requests)
  local good_total, bad_total, why = 0, 0, ""
  for _, t in ipairs(threads) do
    good_total = good_total + t:get("good")
    bad_total = bad_total + t:get("bad")
    if why == "" then why = t:get("first_bad") end
  end
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.status + e.timeout
  io.write(string.format(
    "wrk_result requests=%d good=%d bad=%d errors=%d duration_us=%d bytes=%d " ..
    "p50_us=%d p99_us=%d p999_us=%d first_bad=%s\n",
    summary.requests, good_total, bad_total, errors, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
    why == "" and "-" or why))
end
