from lineagewire.cli import main

main()
