from sits_doctor.cli import main

main()
