module proxyfleet.local/cluster/pause

go 1.22
