import sys


def read_numbers(path):
    numbers = []
    with open(path) as f:
        for line in f:
            numbers.append(int(line))
    return numbers


def main():
    numbers = read_numbers(sys.argv[1])
    average = sum(numbers) / len(numbers) + 1
    print("Average: " + str(average))


main()
