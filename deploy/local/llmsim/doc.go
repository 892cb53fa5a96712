// Package llmsim is a local stand-in for the two model endpoints the worker
// talks to: self-hosted vLLM (the "primary" pool) and a managed
// OpenAI-compatible API (the "fallback" pool). It speaks OpenAI Chat
// Completions over HTTP (streaming and not), exposes vLLM's Prometheus
// metrics, queues requests behind a running limit like vLLM's scheduler, and
// injects faults (429, 500, 503, hangs, dropped connections, malformed or
// truncated JSON) by rate or per request, so routing, fallback, throttling,
// streaming and stop signals can be tested without a GPU or the internet.
//
// It is NOT a model. Answers come from a small, transparent rule engine
// (rules.go): keywords, number patterns, URL shapes and image file names
// decide each stage's JSON. The rules are deterministic (the same prompt
// always gets the same answer) and never read the chat as instructions, so a
// prompt injection typed into a chat cannot change an answer. They are good
// enough to exercise the pipeline end to end and to make the sample data's
// hard negatives come out clean; they say nothing about real model quality.
//
// Endpoints (clients use http://host:port/v1 as their base URL):
//
//	POST /v1/chat/completions  streaming (SSE, usage chunk with
//	                           stream_options.include_usage) or not;
//	                           response_format json_schema named triage,
//	                           extract, vision or judge picks the stage;
//	                           max_tokens / max_completion_tokens cut the
//	                           JSON with finish_reason "length"
//	GET  /v1/models            with vLLM's max_model_len when Config.MaxModelLen is set
//	GET  /version              vLLM's {"version"} when Config.Version is set; else 404,
//	                           as a managed API
//	POST /tokenize             vLLM's tokenizer: {"prompt"} or {"messages"} →
//	                           {"count", "max_model_len", "tokens"}
//	GET  /metrics              vllm:num_requests_running, vllm:num_requests_waiting,
//	                           vllm:time_to_first_token_seconds, vllm:e2e_request_latency_seconds,
//	                           vllm:request_queue_time_seconds, vllm:prompt_tokens_total,
//	                           vllm:generation_tokens_total, vllm:request_success_total,
//	                           vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total,
//	                           chatguard_llmsim_requests_total{outcome}
//	GET  /health
//	GET  /admin/config         the configuration (the API key is never shown)
//	PUT  /admin/config         a partial JSON patch, e.g. {"faults":{"429":1},"ttft":"200ms"}
//	GET  /admin/stats          requests by endpoint, model, stage and outcome
//	DELETE /admin/stats        zero the counters
//
// Config.PrefixCacheBlocks sizes a model of vLLM's prefix cache
// (prefixcache.go): usage.prompt_tokens_details.cached_tokens reports the
// prompt's leading 16-token blocks seen before. Config.ImageTTFT adds time
// to first token per image (a slow vision stage), and Config.ImageURLFetch
// per image given as an http(s) URL rather than a data: URL (the server
// fetching it, across regions for a managed API).
//
// Config.Errors (errormodel.go) makes the stand-in worse than its rules on
// purpose, seeded: per-category misses and false alarms, hard negatives
// judged wrong, and unstable chats that change between repetitions, so
// that an evaluation can be shown to tell a worse endpoint from a better.
//
// The account_history block that follows the transcript (earlier verdicts
// about the room's participants) is read by rules of the stand-in's own
// (history.go): an account with earlier abusive rooms turns its weak
// signals into evidence, one with HistoryStrongRooms makes them one step
// more severe, and history alone never makes a signal. These are simulator
// rules, there so that figures can show the history reaching the stages;
// they say nothing about how a model weighs it.
//
// Config.MaxModelLen makes a prompt over the context length get vLLM's 400
// ("This model's maximum context length is …"). Config.Gullible makes the
// stand-in follow instructions typed into the chat when the chat text is not
// datamarked (gullible.go), so that prompt-injection defences can be
// measured; it is off by default.
//
// Per-request headers for deterministic tests: X-Sim-Fault
// (429|500|503|hang|drop|malformed|truncate|none), X-Sim-TTFT-Ms and
// X-Sim-ITL-Ms (a slow stream for stop-signal tests).
//
// Run it in-process with New and Handler, or on a port with Start; the
// standalone binary is cmd/llmsim.
package llmsim
