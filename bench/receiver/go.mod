module lineagewire/bench/receiver

go 1.22
