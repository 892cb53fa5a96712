package mysql

// HistorySQLForTest is historySQL, for the EXPLAIN test.
const HistorySQLForTest = historySQL
