from toxiforge.cli import main

main()
