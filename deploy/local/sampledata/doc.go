// Package sampledata generates a seeded, reproducible synthetic chat lake for
// local development and evaluation: chat_rooms and chat_messages Parquet
// tables under Hive partitions dt=YYYY-MM-DD/hour=HH, with Korean and English
// conversations covering every abuse category of DESIGN.md, hard negatives,
// obfuscated numbers, images and prompt-injection attempts.
//
// Each room's ground-truth label is written to a separate directory, never
// into the lake, so that nothing the pipeline reads can see it.
//
// Everything here is synthetic: names, ids, account, card and phone numbers
// are random digits, and every domain is fictitious.
package sampledata
