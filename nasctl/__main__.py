from nasctl.cli.main import main

main()
