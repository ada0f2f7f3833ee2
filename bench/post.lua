-- wrk script: POST a 1 KiB body to /v1/process.
wrk.method = "POST"
wrk.body = string.rep("x", 1024)
wrk.headers["Content-Type"] = "application/octet-stream"
