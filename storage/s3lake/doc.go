// Package s3lake is the S3 Parquet lake of lake events: it decodes and
// validates "feedback" queue bodies (Decode), encodes batches of one event
// type as typed Parquet (EncodeParquet) and invalid messages as JSON lines
// (EncodeErrors), names objects under Hive partitions
// event_type=<t>/dt=YYYY-MM-DD/hour=HH/ (ObjectKey, ErrorKey), and writes them
// to S3, large ones by multipart upload (Store).
package s3lake
