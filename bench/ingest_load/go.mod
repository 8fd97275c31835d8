module lineagewire/bench/ingest_load

go 1.22
