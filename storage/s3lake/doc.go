// Package s3lake is the S3 Parquet lake of lake events: it encodes batches
// of one event type (pipeline.LakeRecord, decoded by
// pipeline.DecodeLakeEvent) as typed Parquet (EncodeParquet) and invalid
// messages as JSON lines (EncodeErrors), names objects under Hive partitions
// event_type=<t>/dt=YYYY-MM-DD/hour=HH/ (ObjectKey, ErrorKey), writes them
// to S3, large ones by multipart upload (Store), and puts the three together
// as the consumer's pipeline.LakeWriter (Lake).
package s3lake
