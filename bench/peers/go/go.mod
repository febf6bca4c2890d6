module bulkwire/peers

go 1.22
