package stages

import "github.com/chatguard/chatguard/pipeline/chatprep"

// DataMarker is interleaved through every chat text the models see
// (datamarking, the "spotlighting" defence against prompt injection): the
// system prompt tells the model that text carrying it is data. Chat text
// never contains it (chatprep.Normalize folds it to '^'), so a chat cannot
// forge unmarked text, and UnmarkData restores the text exactly.
const DataMarker = chatprep.DataMarker

// markEvery is chatprep's: the longest unmarked run inside a word.
const markEvery = 8

// MarkData is chatprep.MarkData: a marker before every word and after every
// markEvery runes inside a long word.
func MarkData(s string) string { return chatprep.MarkData(s) }

// UnmarkData is chatprep.UnmarkData.
func UnmarkData(s string) string { return chatprep.UnmarkData(s) }
