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
// Run it in-process with New and Handler, or on a port with Start; the
// standalone binary is cmd/llmsim.
package llmsim
