"""Getting symbols from elsewhere: sources, layouts, transfers, the downloader and the miss path."""
