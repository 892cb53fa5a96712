// Package consoletest drives the moderators' console (cmd/console) in a
// real browser: Debian's chromium, headless, through chromedp. The console
// binary runs against the local stack's MySQL, Redis and SQS, with an
// in-process chat API, LLM simulator, consumer and Athena stand-in.
package consoletest
